// Private: moved to parallel/cuda_module_api.hpp, which parallel defines and the CUDA module
// implements (so parallel includes nothing of cuda/). Kept for the files that still include it
// from here (replica/cuda_replica.cpp); new code includes parallel/cuda_module_api.hpp.
#pragma once

#include "parallel/cuda_module_api.hpp"
