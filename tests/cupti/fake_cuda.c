/* A stand-in for the NVIDIA driver's libcuda.so.1, for the tests: one
 * device, and cuInit loads the library named by CUDA_INJECTION64_PATH and
 * calls its InitializeInjection, as the driver does ("none" counts as unset). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cuInit(unsigned flags) {
  static int initialised;
  (void)flags;
  if (initialised) return 0;
  initialised = 1;
  const char* path = getenv("CUDA_INJECTION64_PATH");
  if (path == NULL || *path == '\0' || strcmp(path, "none") == 0) return 0;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "fake libcuda: cannot load %s: %s\n", path, dlerror());
    return 0;
  }
  int (*initialize)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
  if (initialize != NULL) initialize();
  return 0;
}

int cuDeviceGetCount(int* count) {
  *count = 1;
  return 0;
}
