/* A "CUDA program" that knows nothing of pipetune: it initialises CUDA (the
 * fake libcuda.so.1), works for a moment and exits. */
#include <time.h>

int cuInit(unsigned flags);

int main(void) {
  if (cuInit(0) != 0) return 1;
  struct timespec pause = {0, 250 * 1000 * 1000};
  nanosleep(&pause, NULL);
  return 0;
}
