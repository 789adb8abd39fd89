# paddle_like as a torch.distributed backend: the torch C++ extension
# paddle_like/_torch_backend.so (sources in torch_csrc/), a c10d::ProcessGroup over this
# runtime's engine. Included by CMakeLists.txt beside it, after paddle_like_runtime exists.
#
# Torch's C++ headers and libraries come from TorchConfig.cmake where it works (Debian's
# libtorch-dev ships one), else from find_path/find_library. The extension links the shared
# runtime (one copy of phi/distributed per process, shared with paddle_like._C) and torch's
# Python library (the pybind11 types of c10d::Store and c10d::ProcessGroup). Not found: a
# STATUS line and nothing else (paddle_like.torch_backend then raises ImportError).
option(PADDLE_LIKE_WITH_TORCH "Build the torch.distributed backend where torch is found" ON)
if(NOT PADDLE_LIKE_WITH_TORCH)
  message(STATUS "torch backend: off (PADDLE_LIKE_WITH_TORCH=OFF)")
  return()
endif()

set(_pl_torch_libs "")
set(_pl_torch_incs "")
find_package(Torch CONFIG QUIET)
if(TORCH_FOUND)
  set(_pl_torch_libs ${TORCH_LIBRARIES})
  set(_pl_torch_incs ${TORCH_INCLUDE_DIRS})
else()
  find_path(PADDLE_LIKE_TORCH_INCLUDE torch/csrc/distributed/c10d/ProcessGroup.hpp)
  find_path(PADDLE_LIKE_TORCH_API_INCLUDE torch/torch.h
            PATHS /usr/include/torch/csrc/api/include
            PATH_SUFFIXES torch/csrc/api/include)
  find_library(PADDLE_LIKE_TORCH_LIB torch)
  find_library(PADDLE_LIKE_TORCH_CPU_LIB torch_cpu)
  find_library(PADDLE_LIKE_C10_LIB c10)
  if(PADDLE_LIKE_TORCH_INCLUDE AND PADDLE_LIKE_TORCH_API_INCLUDE AND PADDLE_LIKE_TORCH_LIB
     AND PADDLE_LIKE_TORCH_CPU_LIB AND PADDLE_LIKE_C10_LIB)
    set(_pl_torch_libs ${PADDLE_LIKE_TORCH_LIB} ${PADDLE_LIKE_TORCH_CPU_LIB}
                       ${PADDLE_LIKE_C10_LIB})
    set(_pl_torch_incs ${PADDLE_LIKE_TORCH_INCLUDE} ${PADDLE_LIKE_TORCH_API_INCLUDE})
  endif()
endif()
find_library(PADDLE_LIKE_TORCH_PYTHON_LIB torch_python
             HINTS /usr/lib/x86_64-linux-gnu ${TORCH_INSTALL_PREFIX}/lib)
if(NOT _pl_torch_libs OR NOT PADDLE_LIKE_TORCH_PYTHON_LIB)
  message(STATUS "torch backend: not built (torch's C++ headers and libtorch_python not "
                 "found; Debian: libtorch-dev python3-torch)")
  return()
endif()
find_path(PADDLE_LIKE_TORCH_C10D_INCLUDE torch/csrc/distributed/c10d/ProcessGroup.hpp
          HINTS ${_pl_torch_incs})
if(NOT PADDLE_LIKE_TORCH_C10D_INCLUDE)
  message(STATUS "torch backend: not built (this torch has no c10d headers)")
  return()
endif()
message(STATUS "torch backend: building paddle_like/_torch_backend (torch libs: ${_pl_torch_libs})")

file(GLOB _pl_torch_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/torch_csrc/*.cc)
add_library(paddle_like_torch_ext MODULE ${_pl_torch_srcs})
# Torch's headers are not warning-clean under this project's flags: SYSTEM.
target_include_directories(paddle_like_torch_ext SYSTEM PRIVATE ${_pl_torch_incs}
                           ${Python3_INCLUDE_DIRS})
target_include_directories(paddle_like_torch_ext PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/torch_csrc)
target_link_libraries(paddle_like_torch_ext PRIVATE paddle_like_runtime ${_pl_torch_libs}
                      ${PADDLE_LIKE_TORCH_PYTHON_LIB} pybind11::module)
# torch/extension.h style: the module's name, and pybind11's ABI of torch's own module.
target_compile_definitions(paddle_like_torch_ext PRIVATE TORCH_EXTENSION_NAME=_torch_backend
                           TORCH_API_INCLUDE_EXTENSION_H)
if(TORCH_CXX_FLAGS)
  separate_arguments(_pl_torch_cxx_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(paddle_like_torch_ext PRIVATE ${_pl_torch_cxx_flags})
endif()
set_target_properties(paddle_like_torch_ext PROPERTIES
  OUTPUT_NAME _torch_backend
  LIBRARY_OUTPUT_DIRECTORY ${PADDLE_LIKE_PYTHON_DIR}/paddle_like
  CXX_VISIBILITY_PRESET hidden
  BUILD_RPATH "$ORIGIN" INSTALL_RPATH "$ORIGIN")
pybind11_extension(paddle_like_torch_ext)  # no "lib" prefix, the interpreter's suffix
