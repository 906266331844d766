/* The C programs' checks: a failed one names its file and line and exits 1. */
#ifndef CHECK_H
#define CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                       \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

#define OK(call) CHECK((call) == HSAKMT_STATUS_SUCCESS)

#endif
