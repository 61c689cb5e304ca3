/* batond: replaced by the server work. */
#include <stdio.h>
int main(void)
{
    fputs("batond: not built yet\n", stderr);
    return 1;
}
