# Finds what the CUPTI GPU activity tracer (cupti/) needs: the CUDA toolkit's
# cupti.h (CUDA 13: in the toolkit's include/, older: extras/CUPTI/include).
# Nothing is linked: libcuda and libcupti are loaded at run time with dlopen,
# so one pipetune binary runs with or without a GPU. Sets
# PIPETUNE_HAVE_CUPTI, PIPETUNE_CUPTI_INCLUDE_DIRS, PIPETUNE_HAVE_NVCC, and
# prints one "-- pipetune: CUPTI ..." line saying what was found, or why not.
set(PIPETUNE_HAVE_CUPTI OFF)
set(PIPETUNE_HAVE_NVCC OFF)
if(NOT PIPETUNE_WITH_CUPTI)
  message(STATUS "pipetune: CUPTI off (PIPETUNE_WITH_CUPTI=OFF): no GPU activity tracing")
  return()
endif()
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND)
  message(STATUS "pipetune: CUPTI not found: no CUDA toolkit (find_package(CUDAToolkit); set "
                 "CUDAToolkit_ROOT=/usr/local/cuda if it is elsewhere): no GPU activity tracing")
  return()
endif()
find_path(PIPETUNE_CUPTI_INCLUDE_DIR cupti.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS}
        ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/include
        ${CUDAToolkit_TARGET_DIR}/extras/CUPTI/include
  NO_DEFAULT_PATH)
if(NOT PIPETUNE_CUPTI_INCLUDE_DIR)
  message(STATUS "pipetune: CUPTI not found: CUDA ${CUDAToolkit_VERSION} has no cupti.h in "
                 "${CUDAToolkit_INCLUDE_DIRS} or extras/CUPTI/include: no GPU activity tracing")
  return()
endif()
set(PIPETUNE_HAVE_CUPTI ON)
set(PIPETUNE_CUPTI_INCLUDE_DIRS ${PIPETUNE_CUPTI_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
list(REMOVE_DUPLICATES PIPETUNE_CUPTI_INCLUDE_DIRS)
if(CUDAToolkit_NVCC_EXECUTABLE AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}" AND TARGET CUDA::cublas)
  set(PIPETUNE_HAVE_NVCC ON)
endif()
message(STATUS "pipetune: CUPTI found (CUDA ${CUDAToolkit_VERSION}, ${PIPETUNE_CUPTI_INCLUDE_DIR}/cupti.h): "
               "GPU activity tracing built; libcupti is loaded at run time")
