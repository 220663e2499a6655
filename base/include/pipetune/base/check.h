// PIPETUNE_CHECK: an internal invariant. When it fails the program has a bug,
// not a user error, so it prints where and aborts. User mistakes are Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#define PIPETUNE_CHECK(cond)                                                                 \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: internal check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
