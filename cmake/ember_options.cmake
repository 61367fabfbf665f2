# Top-level options (EMBER_BUILD_<THING> / EMBER_ENABLE_<FEATURE> / EMBER_BACKEND_<NAME>).
option(EMBER_BUILD_TESTS "Build GoogleTest suites" ${PROJECT_IS_TOP_LEVEL})
option(EMBER_BUILD_EXPORTER "Build the host-only exporter" ${PROJECT_IS_TOP_LEVEL})
option(EMBER_BUILD_BENCHMARKS "Build Google Benchmark harnesses" OFF)
option(EMBER_BUILD_FUZZERS "Build libFuzzer targets (needs clang)" OFF)
option(EMBER_ENABLE_LOGGING "Compile log messages in" ON)
option(EMBER_ENABLE_EVENT_TRACER "Compile the per-instruction EventTracer hook in" ON)
set(EMBER_ERROR_CONTEXT 1 CACHE STRING "0 = codes only, 1 = + message and file:line")
set(EMBER_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined")
set(EMBER_HWY_DISPATCH dynamic CACHE STRING "dynamic | static: Highway target dispatch")
set_property(CACHE EMBER_HWY_DISPATCH PROPERTY STRINGS dynamic static)
set(EMBER_BACKEND_XNNPACK AUTO CACHE STRING "AUTO | ON | OFF: AUTO builds it when its dependencies exist")
set(EMBER_BACKEND_CUDA AUTO CACHE STRING "AUTO | ON | OFF")
set(EMBER_BACKEND_VULKAN AUTO CACHE STRING "AUTO | ON | OFF")
foreach(opt EMBER_BACKEND_XNNPACK EMBER_BACKEND_CUDA EMBER_BACKEND_VULKAN)
  set_property(CACHE ${opt} PROPERTY STRINGS AUTO ON OFF)
  if(NOT ${opt} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${opt}=${${opt}}: expected AUTO, ON or OFF")
  endif()
endforeach()
if(NOT EMBER_HWY_DISPATCH MATCHES "^(dynamic|static)$")
  message(FATAL_ERROR "EMBER_HWY_DISPATCH=${EMBER_HWY_DISPATCH}: expected dynamic or static")
endif()

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)

if(EMBER_SANITIZE)
  # Sanitizers must cover every object in the process, so this is the one global flag.
  # vptr off: UBSan's vptr check needs RTTI, and the runtime is built without it, so test code
  # (built with RTTI) that constructs runtime classes would reference typeinfo that does not exist.
  add_compile_options(-fsanitize=${EMBER_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  # float-cast-overflow is not part of "undefined": a NaN or out-of-range float converted to an
  # integer is undefined behaviour, and hostile weights and inputs (NaN, ±Inf) reach such casts.
  set(ember_sanitize_link ${EMBER_SANITIZE})
  if(EMBER_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize=vptr -fsanitize=float-cast-overflow)
    set(ember_sanitize_link "${EMBER_SANITIZE},float-cast-overflow")
  endif()
  add_link_options(-fsanitize=${ember_sanitize_link})
endif()

# Flags for code that ships in an app: no exceptions, no RTTI, warnings on.
add_library(ember_runtime_flags INTERFACE)
add_library(ember::runtime_flags ALIAS ember_runtime_flags)
target_compile_options(ember_runtime_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-fno-exceptions -fno-rtti>
  -Wall -Wextra -Wno-unused-parameter
  $<$<CXX_COMPILER_ID:GNU>:-Wno-format-truncation>)  # messages are cut to fixed-size buffers on purpose
target_compile_definitions(ember_runtime_flags INTERFACE
  EMBER_ERROR_CONTEXT=${EMBER_ERROR_CONTEXT}
  EMBER_ENABLE_LOGGING=$<BOOL:${EMBER_ENABLE_LOGGING}>
  EMBER_ENABLE_EVENT_TRACER=$<BOOL:${EMBER_ENABLE_EVENT_TRACER}>)

# Flags for host tools (exporter, runner, tests): exceptions allowed.
add_library(ember_host_flags INTERFACE)
add_library(ember::host_flags ALIAS ember_host_flags)
target_compile_options(ember_host_flags INTERFACE -Wall -Wextra -Wno-unused-parameter)
target_compile_definitions(ember_host_flags INTERFACE
  EMBER_ERROR_CONTEXT=${EMBER_ERROR_CONTEXT}
  EMBER_ENABLE_LOGGING=$<BOOL:${EMBER_ENABLE_LOGGING}>
  EMBER_ENABLE_EVENT_TRACER=$<BOOL:${EMBER_ENABLE_EVENT_TRACER}>)
