# The app-facing archives (docs/DESIGN.md §1): libruntime.a = platform + core + program + kernel + backend +
# interpreter + executor + kernels; libruntime_llm.a; one libruntime_<backend>.a per backend. Built from the per-folder targets'
# objects, so the folder DAG stays the link graph inside the project. Installed with headers, a
# CMake package (ember::runtime, ember::runtime_null) and pkg-config files naming each archive's
# own dependencies.
set(EMBER_RUNTIME_PARTS ember_runtime_platform ember_runtime_core ember_runtime_program ember_runtime_kernel
    ember_runtime_backend ember_runtime_interpreter ember_runtime_executor ember_kernels_reference ember_kernels_cpu ember_kernels)

function(ember_add_archive name output)
  set(objects "")
  foreach(part ${ARGN})
    list(APPEND objects $<TARGET_OBJECTS:${part}>)
  endforeach()
  add_library(${name} STATIC ${objects})
  set_target_properties(${name} PROPERTIES OUTPUT_NAME ${output} LINKER_LANGUAGE CXX)
  target_include_directories(${name} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}>
    $<INSTALL_INTERFACE:include/ember>)
endfunction()

ember_add_archive(ember_runtime runtime ${EMBER_RUNTIME_PARTS})
target_link_libraries(ember_runtime INTERFACE $<BUILD_INTERFACE:hwy::hwy> $<BUILD_INTERFACE:${XXHASH_LIBRARY}>
                      Threads::Threads)
add_library(ember::runtime ALIAS ember_runtime)
# One archive per backend, and libruntime_backends.a: register_builtin_backends() (backends/builtin.h)
# over the backends this build has, linking their archives.
get_property(EMBER_BUILTIN_BACKENDS GLOBAL PROPERTY EMBER_BUILTIN_BACKENDS)
set(EMBER_BACKEND_ARCHIVES "")
foreach(name ${EMBER_BUILTIN_BACKENDS})
  set(parts ember_backend_${name})
  if(TARGET ember_backend_${name}_ops)  # a device backend's kernels (backends/cuda/ops)
    list(APPEND parts ember_backend_${name}_ops)
  endif()
  ember_add_archive(ember_runtime_${name} runtime_${name} ${parts})
  target_link_libraries(ember_runtime_${name} INTERFACE ember_runtime)
  if(name STREQUAL "cuda")  # the toolkit's libraries, from /usr/local/cuda
    target_link_libraries(ember_runtime_${name} INTERFACE CUDA::cudart_static CUDA::cublasLt)
  elseif(name STREQUAL "xnnpack")  # Debian's shared libXNNPACK.so + libpthreadpool.so (no .a exists)
    target_link_libraries(ember_runtime_${name} INTERFACE $<BUILD_INTERFACE:xnnpack::xnnpack>)
  endif()
  add_library(ember::runtime_${name} ALIAS ember_runtime_${name})
  list(APPEND EMBER_BACKEND_ARCHIVES ember_runtime_${name})
endforeach()
ember_add_archive(ember_runtime_backends runtime_backends ember_backends_builtin)
target_link_libraries(ember_runtime_backends INTERFACE ${EMBER_BACKEND_ARCHIVES})
add_library(ember::runtime_backends ALIAS ember_runtime_backends)
# libruntime_llm.a: the LLM engine (runtime/llm), linked after libruntime.a.
ember_add_archive(ember_runtime_llm_archive runtime_llm ember_runtime_llm)
target_link_libraries(ember_runtime_llm_archive INTERFACE ember_runtime)

include(GNUInstallDirs)
install(TARGETS ember_runtime ${EMBER_BACKEND_ARCHIVES} ember_runtime_backends ember_runtime_llm_archive
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY runtime kernels backends DESTINATION include/ember FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/schema/program_generated.h DESTINATION include/ember/schema)
set(EMBER_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ember-runtime.pc.in ${PROJECT_BINARY_DIR}/ember-runtime.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ember-runtime.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
