# inferscope_enable_cuda(<result-var>): enables the CUDA language in the calling directory when CMake finds
# nvcc, with Hopper (H100/H200) as the default architecture (-DCMAKE_CUDA_ARCHITECTURES=native on a machine
# with its GPU), and sets <result-var> to whether it did. A macro, so enable_language() and the variables act
# in the caller's scope.
include(CheckLanguage)
macro(inferscope_enable_cuda result_var)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    set(${result_var} TRUE)
  else()
    set(${result_var} FALSE)
  endif()
endmacro()
