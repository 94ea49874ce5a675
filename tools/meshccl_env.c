/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-env: lists the parameters meshccl reads, with their values and
 * where each came from; --markdown prints docs/ENV.md.
 */
#include <stdio.h>
#include <string.h>

#include "params.h"

int main(int argc, char **argv)
{
  bool markdown = false;
  bool changed = false;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--markdown") == 0) {
      markdown = true;
    } else if (strcmp(argv[i], "--changed") == 0) {
      changed = true;
    } else {
      fprintf(stderr,
              "usage: %s [--markdown] [--changed]\n"
              "  Lists every NCCL_*/MESHCCL_* variable meshccl reads, its value and source.\n",
              argv[0]);
      return (strcmp(argv[i], "--help") == 0) ? 0 : 2;
    }
  }
  mc_param_dump(stdout, markdown, changed);
  return 0;
}
