/* culprit: the command-line tool (placeholder until the diagnosis engine lands). */
#include <stdio.h>
int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "usage: culprit diagnose|sim|replay ...\n");
	return 2;
}
