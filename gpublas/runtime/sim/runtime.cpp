// runtime.cpp: the simulator's runtime library: the block loop of a launch (scheduler.h's launch, over the
// cores with OpenMP), the fiber scheduler and the block runners (fibers.h), fault and Ctrl-C handling
// (guard.h), the last error of each host thread. Built once per compiler, flags, CPU and header text and
// cached like a module (backends/sim_build.py's runtime_library), loaded with RTLD_GLOBAL before any module
// (backends/sim.py): a module's entry points call its gpublas_sim_launch, handing it where the module's
// built-in variables are (dialect.h's ModuleTls). Before, every module compiled all of this itself at -O3
// (0.7-0.8 s of g++ CPU per module).
#define GPUBLAS_SIM_RUNTIME 1
#include "gpublas_sim.h"
