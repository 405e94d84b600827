# The INTERFACE target every moeplan target links: C++ standard, warnings, sanitizers, paths.
add_library(moeplan_options INTERFACE)
target_compile_features(moeplan_options INTERFACE cxx_std_20)
target_include_directories(moeplan_options INTERFACE ${PROJECT_SOURCE_DIR})
target_compile_definitions(moeplan_options INTERFACE
  MOEPLAN_VERSION="${PROJECT_VERSION}"
  MOEPLAN_RESOURCE_DIR="${PROJECT_SOURCE_DIR}/resources")

set(MOEPLAN_CXX_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
    -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
    -Wformat=2 -Wimplicit-fallthrough)
# NOTE: GCC 12 at -O3 reports false -Wrestrict/-Wstringop-overflow in libstdc++'s own string
# concatenation (GCC bugs 105329, 105651) and false -Wmaybe-uninitialized inside its AVX-512
# intrinsics as inlined by Eigen; they are not about moeplan's code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND MOEPLAN_CXX_WARNINGS -Wno-restrict -Wno-stringop-overflow -Wno-maybe-uninitialized)
endif()
if(MOEPLAN_WERROR)
  list(APPEND MOEPLAN_CXX_WARNINGS -Werror)
endif()
target_compile_options(moeplan_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:${MOEPLAN_CXX_WARNINGS}>)

if(MOEPLAN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MOEPLAN_FUZZ needs clang (-DCMAKE_CXX_COMPILER=clang++)")
  endif()
  # Libraries get coverage instrumentation without libFuzzer's main; the targets link it.
  set(MOEPLAN_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined
      -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_compile_options(moeplan_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:${MOEPLAN_FUZZ_FLAGS}>)
  target_link_options(moeplan_options INTERFACE -fsanitize=address,undefined)
endif()

if(MOEPLAN_SANITIZE)
  set(MOEPLAN_SAN_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  target_compile_options(moeplan_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${MOEPLAN_SAN_FLAGS}>)
  target_link_options(moeplan_options INTERFACE -fsanitize=address,undefined)
endif()

if(MOEPLAN_TSAN)
  if(MOEPLAN_SANITIZE)
    message(FATAL_ERROR "MOEPLAN_TSAN and MOEPLAN_SANITIZE cannot be combined (ThreadSanitizer "
                        "excludes AddressSanitizer); configure two build directories")
  endif()
  target_compile_options(moeplan_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread -fno-omit-frame-pointer>)
  target_link_options(moeplan_options INTERFACE -fsanitize=thread)
endif()

# A library or test suite compiled in batches of sources when MOEPLAN_UNITY_BUILD is on
# (CMakeLists.txt).
function(moeplan_unity_build target)
  if(MOEPLAN_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()

# Every moeplan static library: sources listed explicitly, linked to the options target.
function(moeplan_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_LIBS;PRIVATE_LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC moeplan_options ${ARG_PUBLIC_LIBS} PRIVATE ${ARG_PRIVATE_LIBS})
  moeplan_unity_build(${name})
endfunction()
