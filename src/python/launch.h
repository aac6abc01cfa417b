/* A COMMAND that launches CPython without being it: env python3, a pyenv
 * shim (a bash script that runs `pyenv exec python3.12`), a shell script
 * whose last exec runs python. The process execs its way to CPython (the
 * engines follow the execs); py: probes and $pystack resolve in that
 * CPython, found beforehand by reading the launchers, never running them:
 * env's arguments, pyenv's own choice of version (PYENV_VERSION, a
 * .python-version here or above, PYENV_ROOT/version), a shell script's
 * last `exec PROGRAM` when PROGRAM is written plainly; unshare's COMMAND;
 * chroot's COMMAND inside its NEWROOT (a container made by hand:
 * `unshare -p -f -m chroot ROOT python3.14 app.py`), the root's own file. */
#ifndef USC_PYTHON_LAUNCH_H
#define USC_PYTHON_LAUNCH_H

/* argv (COMMAND's): 0 with *path (malloc'd) the CPython program it runs
 * in the end, through at most 8 launchers; -ENOENT when argv[0] is CPython
 * itself or none is found. */
int python_launched(char *const *argv, char **path);

#endif
