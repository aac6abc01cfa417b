/* The one way uscope creates a file it writes (core/outfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/outfile.h"

/* Errors of the rules, told apart from open(2)'s: open without O_EXCL
 * never says EEXIST, and ENOTUNIQ is nothing a path gives. */
#define ERR_FOREIGN_FILE EEXIST	/* another user's file in a sticky directory */
#define ERR_FOREIGN_LINK ENOTUNIQ	/* another user's symlink in a sticky directory */

/* The directory path is in: sticky and writable by others (/tmp)? Its
 * owner in *uid. */
static bool in_shared_dir(const char *path, uid_t *uid)
{
	char buf[PATH_MAX];
	struct stat st;

	if (strlen(path) >= sizeof(buf))
		return false;
	strcpy(buf, path);
	if (stat(dirname(buf), &st))
		return false;
	*uid = st.st_uid;
	return (st.st_mode & S_ISVTX) && (st.st_mode & (S_IWGRP | S_IWOTH));
}

/* May uscope (euid) use what st (the path's, in its directory) is? */
static int check_owner(const char *path, const struct stat *st, int err)
{
	uid_t dir_uid;

	if (st->st_uid == geteuid() || !in_shared_dir(path, &dir_uid) || st->st_uid == dir_uid)
		return 0;
	return -err;
}

int usc_outfile_open(const char *path, bool append)
{
	const int base = O_WRONLY | O_CLOEXEC | O_NOCTTY | (append ? O_APPEND : 0);
	struct stat st;
	int fd, err;

	/* a new file: 0600, whatever the umask */
	fd = open(path, base | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		if (fchmod(fd, 0600)) {
			err = -errno;
			close(fd);
			unlink(path);
			return err;
		}
		return fd;
	}
	if (errno != EEXIST)
		return -errno;
	/* there already: a symbolic link is followed unless another user
	 * planted it in a shared directory */
	if (!lstat(path, &st) && S_ISLNK(st.st_mode) &&
	    (err = check_owner(path, &st, ERR_FOREIGN_LINK)))
		return err;
	fd = open(path, base);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	if (S_ISREG(st.st_mode)) {
		/* nor is another user's file in a shared directory overwritten */
		if ((err = check_owner(path, &st, ERR_FOREIGN_FILE)) ||
		    /* what group and others could read of it, taken away */
		    (st.st_uid == geteuid() && (st.st_mode & 077) &&
		     fchmod(fd, st.st_mode & 07700) && (err = -errno)) ||
		    (!append && ftruncate(fd, 0) && (err = -errno))) {
			close(fd);
			return err;
		}
	}
	return fd;
}

FILE *usc_outfile_fopen(const char *path)
{
	int fd = usc_outfile_open(path, false);
	FILE *f;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return f;
}

int usc_outdir_make(const char *path)
{
	struct stat st;
	int err;

	if (!mkdir(path, 0700))
		return chmod(path, 0700) ? -errno : 0;
	if (errno != EEXIST)
		return -errno;
	if (lstat(path, &st))
		return -errno;
	if (S_ISLNK(st.st_mode) && (err = check_owner(path, &st, ERR_FOREIGN_LINK)))
		return err;
	if (stat(path, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return check_owner(path, &st, ERR_FOREIGN_FILE);
}

const char *usc_outfile_strerror(int err)
{
	if (err < 0)
		err = -err;
	if (err == ERR_FOREIGN_FILE)
		return "another user owns it in a shared sticky directory: not overwritten";
	if (err == ERR_FOREIGN_LINK)
		return "a symbolic link another user made in a shared sticky directory: not "
		       "followed";
	return strerror(err);
}
