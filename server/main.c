#include <stdio.h>
int main(void) { fprintf(stderr, "culpritd: not yet\n"); return 1; }
