# Third-party dependencies. A component that is ON (they all are by default) and cannot be built
# stops the configure with one error naming the Debian 12 package that provides what is missing;
# leaving a component out is an explicit choice (-DMOEPLAN_BUILD_GUI=OFF, ...). Only CUDA (and
# NCCL with it) is optional: the configure says whether it was found and what is built without it.
#   always:            nlohmann-json, Eigen, Boost.Graph, SQLite, CLI11, threads
#   MOEPLAN_ENABLE_MPI       Open MPI (the distributed engine; NCCL is bootstrapped through it)
#   MOEPLAN_BUILD_GUI        Qt6 Widgets, Charts (needs Qt6 OpenGL), Svg, Concurrent, Test
#   MOEPLAN_BUILD_TESTS      GoogleTest and GoogleMock
#   MOEPLAN_BUILD_BENCHMARKS Google Benchmark
# scripts/install-deps.sh installs every package named here.

# moeplan_require(<found?> <what> <debian packages> [<option that leaves it out>])
function(moeplan_require found what packages)
  if(NOT found)
    set(hint "")
    if(ARGC GREATER 3)
      set(hint " (or leave it out: -D${ARGV3}=OFF)")
    endif()
    message(FATAL_ERROR "moeplan: ${what} not found: install the Debian package(s) ${packages} "
                        "(bash scripts/install-deps.sh installs them all)${hint}")
  endif()
endfunction()

find_package(nlohmann_json 3.10 QUIET)
moeplan_require("${nlohmann_json_FOUND}" "nlohmann-json >= 3.10" nlohmann-json3-dev)
find_package(Eigen3 3.4 QUIET NO_MODULE)
moeplan_require("${Eigen3_FOUND}" "Eigen >= 3.4" libeigen3-dev)
find_package(Boost 1.74 QUIET)
set(MOEPLAN_HAVE_BOOST_GRAPH OFF)
if(Boost_FOUND AND EXISTS "${Boost_INCLUDE_DIRS}/boost/graph/adjacency_list.hpp")
  set(MOEPLAN_HAVE_BOOST_GRAPH ON)
endif()
moeplan_require("${MOEPLAN_HAVE_BOOST_GRAPH}" "Boost.Graph >= 1.74" libboost-graph-dev)
find_package(SQLite3 QUIET)
moeplan_require("${SQLite3_FOUND}" "SQLite 3" libsqlite3-dev)
find_package(CLI11 CONFIG QUIET)
moeplan_require("${CLI11_FOUND}" "CLI11" libcli11-dev)
find_package(Threads REQUIRED)

# In the libFuzzer build only the models and planner libraries are built: nothing below applies.
if(MOEPLAN_FUZZ)
  return()
endif()

set(MOEPLAN_HAVE_CUDA OFF)
set(MOEPLAN_HAVE_NCCL OFF)
if(MOEPLAN_ENABLE_CUDA)
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 has no CUDA20 flags for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # NOTE: Debian 12's CMake 3.25.1 FindCUDAToolkit sets a property on CUDA::nvToolsExt without
    # checking that the target exists, and CUDA 13 no longer ships nvToolsExt: the configure
    # stops ("set_property could not find TARGET CUDA::nvToolsExt"). The branch only runs for
    # projects requiring CMake >= 3.25, so it is hidden by lowering the variable it reads for
    # this one call (policies are unaffected); later CMake releases check the target.
    set(moeplan_min_version ${CMAKE_MINIMUM_REQUIRED_VERSION})
    if(CMAKE_VERSION VERSION_LESS 3.25.2)
      set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_MINIMUM_REQUIRED_VERSION ${moeplan_min_version})
    set(MOEPLAN_HAVE_CUDA ON)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(MOEPLAN_HAVE_NCCL ON)
    endif()
  endif()
endif()
if(MOEPLAN_HAVE_CUDA)
  message(STATUS "moeplan: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "sm_${CMAKE_CUDA_ARCHITECTURES}; GPU tests skip visibly without a device)")
  if(MOEPLAN_HAVE_NCCL)
    message(STATUS "moeplan: NCCL ON (${NCCL_LIBRARY})")
  else()
    message(STATUS "moeplan: NCCL OFF (nccl.h/libnccl not found beside the CUDA toolkit or in "
                   "NCCL_HOME): the CUDA backend is built without the NCCL communicator")
  endif()
elseif(NOT MOEPLAN_ENABLE_CUDA)
  message(STATUS "moeplan: CUDA backend OFF (-DMOEPLAN_ENABLE_CUDA=OFF): built without "
                 "kernels/cuda, the GPU tests and bench_cuda_kernels; the CPU backend does all")
else()
  message(STATUS "moeplan: CUDA backend OFF (no nvcc on PATH or in /usr/local/cuda): built "
                 "without kernels/cuda, the GPU tests and bench_cuda_kernels; the CPU backend "
                 "does all")
endif()

set(MOEPLAN_HAVE_MPI OFF)
if(MOEPLAN_ENABLE_MPI)
  find_package(MPI QUIET COMPONENTS CXX)
  moeplan_require("${MPI_CXX_FOUND}" "MPI (C++)" "libopenmpi-dev openmpi-bin" MOEPLAN_ENABLE_MPI)
  if(NOT MPIEXEC_EXECUTABLE)
    moeplan_require(FALSE "mpirun" openmpi-bin MOEPLAN_ENABLE_MPI)
  endif()
  set(MOEPLAN_HAVE_MPI ON)
  message(STATUS "moeplan: MPI ON (${MPIEXEC_EXECUTABLE})")
else()
  message(STATUS "moeplan: MPI OFF (-DMOEPLAN_ENABLE_MPI=OFF): ranks run as threads only")
endif()

if(MOEPLAN_BUILD_GUI)
  # One component at a time, so the error names the package that carries the missing one. Qt6
  # Charts needs Qt6 OpenGL, whose CMake files are in libqt6opengl6-dev, not in qt6-base-dev.
  set(moeplan_qt_packages
    "Widgets=qt6-base-dev" "Concurrent=qt6-base-dev" "Test=qt6-base-dev"
    "OpenGL=libqt6opengl6-dev" "Charts=qt6-charts-dev" "Svg=qt6-svg-dev")
  foreach(entry IN LISTS moeplan_qt_packages)
    string(REPLACE "=" ";" entry "${entry}")
    list(GET entry 0 component)
    list(GET entry 1 package)
    find_package(Qt6 QUIET COMPONENTS ${component})
    moeplan_require("${Qt6${component}_FOUND}" "Qt6 ${component}" ${package} MOEPLAN_BUILD_GUI)
  endforeach()
  message(STATUS "moeplan: GUI ON (Qt ${Qt6_VERSION}): moeplan-gui and gui_test are built")
else()
  message(STATUS "moeplan: GUI OFF (-DMOEPLAN_BUILD_GUI=OFF): moeplan-gui is not built")
endif()

if(MOEPLAN_BUILD_TESTS)
  find_package(GTest QUIET)
  moeplan_require("${GTest_FOUND}" "GoogleTest" "libgtest-dev libgmock-dev" MOEPLAN_BUILD_TESTS)
endif()
if(MOEPLAN_BUILD_BENCHMARKS)
  find_package(benchmark QUIET)
  moeplan_require("${benchmark_FOUND}" "Google Benchmark" libbenchmark-dev
                  MOEPLAN_BUILD_BENCHMARKS)
endif()
