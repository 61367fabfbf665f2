# ember_add_runtime_library(name SOURCES ... DEPS ...): one target per runtime folder, compiled with
# the runtime flags; `DEPS` are the folders it may depend on (docs/DESIGN.md §1), so the link graph is the DAG.
function(ember_add_runtime_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(ember_${name} STATIC ${ARG_SOURCES})
  add_library(ember::${name} ALIAS ember_${name})
  target_include_directories(ember_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}>)
  target_link_libraries(ember_${name} PUBLIC ${ARG_DEPS} PRIVATE ember::runtime_flags ${ARG_PRIVATE_DEPS})
  target_compile_features(ember_${name} PUBLIC cxx_std_17)
  set_property(GLOBAL APPEND PROPERTY EMBER_RUNTIME_LIBRARIES ember_${name})
endfunction()

# ember_add_test(name SOURCES ... LIBS ...): a GoogleTest binary registered with ctest.
function(ember_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} ember::host_flags GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_features(${name} PRIVATE cxx_std_20)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "EMBER_SOURCE_DIR=${PROJECT_SOURCE_DIR};EMBER_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
