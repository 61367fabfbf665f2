# Third-party packages, all from Debian (scripts/setup.sh installs them). Nothing is downloaded.
find_package(Threads REQUIRED)
find_package(FlatBuffers CONFIG REQUIRED)   # 2.0.8: flatbuffers::flatc, header-only use of generated code
find_package(hwy CONFIG REQUIRED)           # 1.0.3: hwy::hwy (shared), hwy::hwy_test

find_path(XXHASH_INCLUDE_DIR xxhash.h)
find_library(XXHASH_LIBRARY xxhash)
if(NOT XXHASH_INCLUDE_DIR OR NOT XXHASH_LIBRARY)
  message(FATAL_ERROR "xxhash not found: run scripts/setup.sh (Debian package libxxhash-dev)")
endif()
add_library(ember_xxhash INTERFACE)
target_include_directories(ember_xxhash SYSTEM INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(ember_xxhash INTERFACE ${XXHASH_LIBRARY})

if(EMBER_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(EMBER_BUILD_EXPORTER)
  find_package(nlohmann_json CONFIG QUIET)
endif()
