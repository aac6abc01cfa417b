/* The kernel matrix's initramfs init (tests/vm): a static program, so the
 * initramfs needs no shell. It loads the modules listed in /modules (the
 * virtio and ext4 ones a Debian kernel builds as modules, dependencies
 * first), mounts the guest's root (/dev/vda) and the checkout (/dev/vdb,
 * at /src/uscope), moves /dev over, and runs the command the kernel line
 * names with uscope.init= (default /sbin/init) as PID 1 in the root.
 *
 * Built by scripts/kernels.sh with `cc -static`. Every failure is said on
 * the console and the guest powers off (the driver sees no result). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "rdinit: %s: %s\n", what, strerror(errno));
	sync();
	reboot(RB_POWER_OFF);
	_exit(1);
}

static void load_modules(void)
{
	char line[512];
	FILE *f = fopen("/modules", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		int fd;

		line[strcspn(line, "\n")] = 0;
		if (!line[0])
			continue;
		fd = open(line, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die(line);
		if (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST)
			die(line);
		close(fd);
	}
	fclose(f);
}

/* /dev/vdX appears once the virtio probe is done (asynchronously). */
static void wait_for(const char *dev)
{
	struct stat st;

	for (int i = 0; i < 500 && stat(dev, &st); i++)
		usleep(20000);
	if (stat(dev, &st))
		die(dev);
}

/* uscope.init=PATH from the kernel's command line */
static char *init_path(void)
{
	static char buf[4096];
	char *p, *e;
	int fd = open("/proc/cmdline", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (n <= 0)
		return "/sbin/init";
	buf[n] = 0;
	p = strstr(buf, "uscope.init=");
	if (!p)
		return "/sbin/init";
	p += strlen("uscope.init=");
	e = p + strcspn(p, " \n");
	*e = 0;
	return p;
}

int main(void)
{
	char *init;

	mkdir("/dev", 0755);
	mkdir("/proc", 0555);
	mkdir("/newroot", 0755);
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) && errno != EBUSY)
		die("mount /dev");
	if (mount("proc", "/proc", "proc", 0, NULL))
		die("mount /proc");
	load_modules();
	init = init_path();
	wait_for("/dev/vda");
	if (mount("/dev/vda", "/newroot", "ext4", 0, NULL))
		die("mount /dev/vda");
	mkdir("/newroot/src", 0755);
	mkdir("/newroot/src/uscope", 0755);
	wait_for("/dev/vdb");
	if (mount("/dev/vdb", "/newroot/src/uscope", "ext4", 0, NULL))
		die("mount /dev/vdb");
	mkdir("/newroot/dev", 0755);
	if (mount("/dev", "/newroot/dev", NULL, MS_MOVE, NULL))
		die("move /dev");
	umount2("/proc", MNT_DETACH);
	if (chdir("/newroot") || mount(".", "/", NULL, MS_MOVE, NULL) || chroot(".") ||
	    chdir("/"))
		die("switch to the root");
	execl(init, init, (char *)NULL);
	die(init);
	return 1;
}
