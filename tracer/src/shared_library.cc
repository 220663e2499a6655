// The one source of libpipetune_tracer.so (pipetune_tracer_shared): the
// library is the whole static tracer archive linked in, and a shared library
// target needs a source of its own.
#include "pipetune/tracer/tracer_c.h"
