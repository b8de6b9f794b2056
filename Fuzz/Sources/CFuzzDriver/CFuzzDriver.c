// Header-only module; SwiftPM wants one source file in a C target.
#include "CFuzzDriver.h"
