/* baton CLI entry point. */
#include <stdio.h>
int main(void)
{
    fputs("baton: not built yet\n", stderr);
    return 1;
}
