# Finds LibTorch inside the PyTorch wheel of AUTOACCEL_PYTHON and defines the
# imported target autoaccel::torch (headers as SYSTEM, the wheel's shared
# libraries, the C++ ABI torch was built with, RPATH to the wheel's lib dir).
#
# Torch's own CMake config is not used: the wheel is built with CUDA and its
# config would look for a CUDA toolkit matching the wheel's; linking the
# wheel's libraries directly needs no toolkit at all, and no CUDA header is
# included by the engine (it reaches CUDA through ATen's device-generic API).
include_guard(GLOBAL)

set(AUTOACCEL_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python"
    CACHE FILEPATH "Python interpreter whose torch package provides LibTorch")

# ON: link libtorch.so, which loads libtorch_cuda.so and so registers the CUDA
# backend (device "cuda:N" works where a GPU is present). OFF: CPU-only
# runtime; a trial process then starts ~0.13 s faster with ~350 MB less
# resident memory, and "cuda:N" trials fail with "CUDA is not available".
option(AUTOACCEL_TORCH_CUDA "Load LibTorch's CUDA backend in the trial runner" ON)
execute_process(
  COMMAND "${AUTOACCEL_PYTHON}" -c
          "import os, torch; print(os.path.dirname(torch.__file__)); \
print(int(torch.compiled_with_cxx11_abi())); print(torch.__version__)"
  RESULT_VARIABLE _aa_torch_rc
  OUTPUT_VARIABLE _aa_torch_out
  ERROR_VARIABLE _aa_torch_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _aa_torch_rc EQUAL 0)
  message(FATAL_ERROR
    "autoaccel: cannot import torch with AUTOACCEL_PYTHON=${AUTOACCEL_PYTHON}:\n${_aa_torch_err}\n"
    "Set -DAUTOACCEL_PYTHON=/path/to/python (with torch installed) or -DAUTOACCEL_BUILD_ENGINE=OFF.")
endif()
string(REPLACE "\n" ";" _aa_torch_out "${_aa_torch_out}")
list(GET _aa_torch_out 0 AUTOACCEL_TORCH_ROOT)
list(GET _aa_torch_out 1 AUTOACCEL_TORCH_CXX11_ABI)
list(GET _aa_torch_out 2 AUTOACCEL_TORCH_VERSION)
set(AUTOACCEL_TORCH_LIB_DIR "${AUTOACCEL_TORCH_ROOT}/lib")

foreach(_aa_lib torch torch_cpu c10)
  if(NOT EXISTS "${AUTOACCEL_TORCH_LIB_DIR}/lib${_aa_lib}.so")
    message(FATAL_ERROR "autoaccel: ${AUTOACCEL_TORCH_LIB_DIR}/lib${_aa_lib}.so not found")
  endif()
endforeach()
if(NOT AUTOACCEL_TORCH_VERSION MATCHES "^2\\.11\\.")
  message(WARNING "autoaccel: torch ${AUTOACCEL_TORCH_VERSION} found; the project pins 2.11.0 "
                  "(the version on the GPU machines), other versions are untested")
endif()
message(STATUS "autoaccel: LibTorch ${AUTOACCEL_TORCH_VERSION} from ${AUTOACCEL_TORCH_ROOT} "
               "(_GLIBCXX_USE_CXX11_ABI=${AUTOACCEL_TORCH_CXX11_ABI}, CUDA backend ${AUTOACCEL_TORCH_CUDA})")

set(_aa_torch_libs "")
if(AUTOACCEL_TORCH_CUDA)
  # Linked for its side effect only, so it must survive --as-needed.
  list(APPEND _aa_torch_libs "-Wl,--push-state,--no-as-needed"
       "${AUTOACCEL_TORCH_LIB_DIR}/libtorch.so" "-Wl,--pop-state")
endif()
list(APPEND _aa_torch_libs "${AUTOACCEL_TORCH_LIB_DIR}/libtorch_cpu.so"
     "${AUTOACCEL_TORCH_LIB_DIR}/libc10.so")

# Imported, so its include directories are SYSTEM: -Wall -Wextra stay ours.
add_library(autoaccel::torch INTERFACE IMPORTED GLOBAL)
set_target_properties(autoaccel::torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES
    "${AUTOACCEL_TORCH_ROOT}/include;${AUTOACCEL_TORCH_ROOT}/include/torch/csrc/api/include"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${AUTOACCEL_TORCH_CXX11_ABI}"
  INTERFACE_LINK_LIBRARIES "${_aa_torch_libs}"
  # Binaries find the wheel's libraries without LD_LIBRARY_PATH, also once
  # installed.
  INTERFACE_LINK_OPTIONS "LINKER:-rpath,${AUTOACCEL_TORCH_LIB_DIR}")
