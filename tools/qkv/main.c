#include <stdio.h>
#include "qkv/qkv.h"
int main(void) { printf("qkv %s\n", QKV_VERSION); return 0; }
