/* Failures injected by the tests, on paths whose error handling has no
 * other way to be reached: USCOPE_FAULT=POINT[,POINT...] in uscope's
 * environment makes core_fault(POINT) true. Each point is named where it
 * is used ("inject.proc": the inject engine's record of a process it is
 * about to patch cannot be allocated). Never on a hot path. */
#ifndef USC_CORE_FAULT_H
#define USC_CORE_FAULT_H

#include <stdbool.h>

bool core_fault(const char *point);

#endif
