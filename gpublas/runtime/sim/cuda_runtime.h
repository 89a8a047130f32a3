// cuda_runtime.h: nothing to declare on the simulator; gpublas_sim.h (force-included) has it all.
#pragma once
