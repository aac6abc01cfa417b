/* Creating what uscope writes (recordings, -o outputs, exports, profiles,
 * the unwind cache): its user's alone, as perf makes perf.data. A new file
 * is 0600 and a new directory 0700 whatever the umask; an existing file
 * keeps its mode less what group and others could read (never widened);
 * in a shared sticky directory (/tmp) a symbolic link or a file another
 * user owns there is neither followed nor truncated (the kernel's
 * protected_symlinks and protected_regular rules, whatever their sysctls
 * say). */
#ifndef USC_CORE_OUTFILE_H
#define USC_CORE_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

/* path opened to write, truncated (append: not), O_CLOEXEC: the fd, or
 * -errno (not logged; usc_outfile_strerror says why). */
int usc_outfile_open(const char *path, bool append);
/* The same as a FILE (mode "w"); NULL with errno set. */
FILE *usc_outfile_fopen(const char *path);
/* The directory path made (0700), or an existing one taken as it is when
 * it is a directory the rules above allow. 0 or -errno. */
int usc_outdir_make(const char *path);
/* Why err (from the above) failed: strerror's words, or the rule's. */
const char *usc_outfile_strerror(int err);

#endif
