/* The standard descriptors of `baton` and `batond` (see cli.h): kept out of
 * cli_args.c, whose parsers the fuzz harnesses run. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli/cli.h"

int baton_cli_hold_std_fds(void)
{
    int fd;

    for (fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++) {
        int held;

        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        /* the lowest free descriptor: fd itself, as those below it are open */
        held = open("/dev/null", fd == STDIN_FILENO ? O_WRONLY : O_RDONLY);
        if (held < 0)
            return -1;
        if (held != fd) {
            const int moved = dup2(held, fd);

            close(held);
            if (moved < 0)
                return -1;
        }
    }
    return 0;
}
