/* Which checkpoint a run directory holds last. Its own file because both the run (resume, refusing to start over a
 * run) and finetune.init_from (a run directory as the source) ask, and those two call each other otherwise. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

long qkv__run_newest_checkpoint(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char tail[32];
        long step;
        if (sscanf(e->d_name, "ckpt-%ld%31s", &step, tail) == 2 && !strcmp(tail, ".safetensors") && step > best)
            best = step;
    }
    closedir(d);
    return best;
}
