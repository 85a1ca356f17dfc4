/* The checking macro of the C test programs (api.c, panic.c): counts each
 * check and stops the program at the first that fails, naming it. */
#ifndef GNOMON_TEST_CHECK_H
#define GNOMON_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int checks;

#define CHECK(cond)                                                        \
  do {                                                                     \
    checks++;                                                              \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,     \
              #cond);                                                      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

#endif
