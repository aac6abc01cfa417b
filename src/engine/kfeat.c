/* The running kernel's BPF features, probed once (kfeat.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/btf.h>

#include "core/log.h"
#include "engine/kfeat.h"

#define VMLINUX_BTF "/sys/kernel/btf/vmlinux"

/* The string section of the kernel's BTF, or NULL (*len its bytes): its
 * header, then the strings alone, not the 3 MiB of types before them
 * (sysfs gives the file a page a read: a thousand reads fewer). */
static char *btf_strings(size_t *len)
{
	int fd = open(VMLINUX_BTF, O_RDONLY | O_CLOEXEC);
	struct btf_header h;
	char *buf = NULL;
	size_t n = 0;

	if (fd < 0)
		return NULL;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != BTF_MAGIC ||
	    h.hdr_len < sizeof(h) || !h.str_len || h.str_len > (64u << 20) ||
	    !(buf = malloc(h.str_len)))
		goto fail;
	while (n < h.str_len) {
		ssize_t r = pread(fd, buf + n, h.str_len - n,
				  (off_t)h.hdr_len + h.str_off + (off_t)n);

		if (r <= 0)
			goto fail;
		n += (size_t)r;
	}
	close(fd);
	*len = n;
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

/* Does the kernel's BTF name each of names (a type, a function, a
 * kfunc)? A read of the file's strings and a search of them: a name the
 * kernel has is a string of its BTF. */
static void btf_names(const char *const *names, bool *has, size_t n)
{
	size_t slen = 0;
	char *strs = btf_strings(&slen);

	for (size_t i = 0; i < n; i++)
		has[i] = false;
	if (!strs)
		return;
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(names[i]);
		char *pat = malloc(nl + 2);

		if (!pat)
			continue;
		pat[0] = 0;
		memcpy(pat + 1, names[i], nl + 1);	/* "\0name\0" */
		has[i] = memmem(strs, slen, pat, nl + 2) != NULL;
		free(pat);
	}
	free(strs);
}

static bool helper(enum bpf_func_id id)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, id, NULL) == 1;
}

/* A sleepable program of the uprobes' type loads (one that returns 0). */
static bool sleepable_uprobes(void)
{
	const struct bpf_insn ret0[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .prog_flags = BPF_F_SLEEPABLE);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", ret0, 2, &opts);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static bool map_type(enum bpf_map_type t)
{
	return libbpf_probe_bpf_map_type(t, NULL) == 1;
}

/* USCOPE_BPF_LACK=NAME,...: features taken as missing (btf, ringbuf,
 * task_storage, cookie, loop, sleepable, mem_alloc, copy_str), to see on
 * this kernel what uscope does on one without them (the tests do). */
static void lack(struct kfeat *k)
{
	static const struct {
		const char *name;
		size_t off;
	} f[] = {
		{"btf", offsetof(struct kfeat, btf)},
		{"ringbuf", offsetof(struct kfeat, ringbuf)},
		{"task_storage", offsetof(struct kfeat, task_storage)},
		{"cookie", offsetof(struct kfeat, cookie)},
		{"loop", offsetof(struct kfeat, loop)},
		{"sleepable", offsetof(struct kfeat, sleepable)},
		{"mem_alloc", offsetof(struct kfeat, mem_alloc)},
		{"copy_str", offsetof(struct kfeat, copy_str)},
	};
	const char *env = getenv("USCOPE_BPF_LACK");

	for (const char *p = env; p && *p; p += *p == ',') {
		size_t n = strcspn(p, ",");

		for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
			if (strlen(f[i].name) == n && !strncmp(p, f[i].name, n))
				*(bool *)((char *)k + f[i].off) = false;
		p += n;
	}
}

const struct kfeat *kfeat_get(void)
{
	static struct kfeat k;
	static bool done;
	static const char *const names[] = {"bpf_mem_alloc", "bpf_copy_from_user_str"};
	bool has[2];

	if (done)
		return &k;
	done = true;
	k.btf = access(VMLINUX_BTF, R_OK) == 0;
	k.ringbuf = map_type(BPF_MAP_TYPE_RINGBUF);
	k.task_storage = k.btf && map_type(BPF_MAP_TYPE_TASK_STORAGE);
	k.task_btf = k.btf && helper(BPF_FUNC_get_current_task_btf);
	k.cookie = helper(BPF_FUNC_get_attach_cookie);
	k.loop = helper(BPF_FUNC_loop);
	k.sleepable = sleepable_uprobes();
	btf_names(names, has, 2);
	k.mem_alloc = has[0];
	k.copy_str = has[1];
	lack(&k);
	log_debug("kernel BPF: btf %d ringbuf %d task_storage %d task_btf %d cookie %d loop %d "
		  "sleepable %d mem_alloc %d copy_from_user_str %d", k.btf, k.ringbuf,
		  k.task_storage, k.task_btf, k.cookie, k.loop, k.sleepable, k.mem_alloc, k.copy_str);
	return &k;
}

const char *kfeat_bpf_missing(const struct kfeat *k, char *buf, size_t len)
{
	const char *what[6];
	size_t n = 0, used = 0;

	if (!k->btf)
		what[n++] = "its own BTF (" VMLINUX_BTF ", CONFIG_DEBUG_INFO_BTF)";
	if (!k->ringbuf)
		what[n++] = "BPF ring buffers";
	if (!k->task_storage || !k->task_btf)
		what[n++] = "task storage maps";
	if (!k->cookie)
		what[n++] = "uprobe attach cookies";
	if (!k->loop)
		what[n++] = "the bpf_loop helper";
	buf[0] = 0;
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
					 !i ? "" : i == n - 1 ? " and " : ", ", what[i]);
	return buf;
}
