/* USDT probes: a site on every note of the module whose PROVIDER:NAME the
 * probe's globs match, its arguments those the note describes. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "objfile/objfile.h"
#include "resolve/resolve_int.h"
#include "usdt/usdt.h"

/* The site of one note. 0 or -errno, logged. */
static int usdt_site(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		     const struct objfile *ef, const struct usdt_note *nt, struct site_vec *sv)
{
	struct usc_fetcharg uargs[USDT_MAX_ARGS];
	struct usdt_arg_error aerr = {0};
	unsigned nu = 0;
	struct usc_site *s;
	uint64_t off, ref = 0;

	if (usdt_parse_args(nt->args, ef, uargs, USDT_MAX_ARGS, &nu, &aerr)) {
		log_error("%s: %s:%s in %s has an argument spec uscope cannot read at "
			  "byte %zu (%s): \"%s\"", spec->text, nt->provider, nt->name, path,
			  aerr.pos, aerr.msg ? aerr.msg : "?", nt->args);
		return -EINVAL;
	}
	if (objfile_vaddr_to_offset(ef, nt->pc, &off)) {
		log_error("%s: %s:%s has a site at 0x%llx outside the file's segments",
			  spec->text, nt->provider, nt->name, (unsigned long long)nt->pc);
		return -EINVAL;
	}
	if (nt->sema && objfile_vaddr_to_offset(ef, nt->sema, &ref)) {
		log_error("%s: %s:%s has its semaphore at 0x%llx, which has no file offset",
			  spec->text, nt->provider, nt->name, (unsigned long long)nt->sema);
		return -EINVAL;
	}
	s = resolve_site_new(sv, spec, idx, path);
	if (!s)
		return -ENOMEM;
	if (asprintf(&s->symbol, "%s_%s", nt->provider, nt->name) < 0)
		s->symbol = NULL;
	s->vaddr = nt->pc;
	s->offset = off;
	s->ref_ctr_offset = ref;
	if (spec->event_given)
		snprintf(s->label, sizeof(s->label), "%s", spec->event);
	else
		snprintf(s->label, sizeof(s->label), "%s:%s", nt->provider, nt->name);
	if (!s->symbol)
		return -ENOMEM;
	return resolve_bind_site(s, uargs, nu, NULL, sv);
}

/* No note matched: say which probes the module has. */
static void usdt_log_none(const struct usc_probe_spec *spec, const char *path,
			  const struct usdt_note *notes, size_t nnotes)
{
	char list[512] = "";
	size_t used = 0;

	for (size_t i = 0; i < nnotes && used < sizeof(list) - 1; i++) {
		bool dup = false;

		for (size_t k = 0; k < i; k++)
			dup |= !strcmp(notes[k].provider, notes[i].provider) &&
			       !strcmp(notes[k].name, notes[i].name);
		if (!dup)
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%%%s:%s",
						 used ? ", " : "", notes[i].provider,
						 notes[i].name);
	}
	if (nnotes)
		log_error("%s: no USDT probe %%%s:%s in %s; it has: %s", spec->text,
			  spec->provider, spec->symbol, path, list);
	else
		log_error("%s: %s has no USDT probes", spec->text, path);
}

int resolve_usdt(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		 const struct objfile *ef, struct site_vec *sv)
{
	struct usdt_note *notes = NULL;
	size_t nnotes = 0, matched = 0;
	int ret = usdt_read(ef, &notes, &nnotes);

	if (ret) {
		if (ret != -EINVAL)	/* a malformed note was reported already */
			log_error("%s: cannot read the USDT notes of %s: %s", spec->text, path,
				  strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < nnotes && !ret; i++) {
		const struct usdt_note *nt = &notes[i];

		if (fnmatch(spec->provider, nt->provider, 0) || fnmatch(spec->symbol, nt->name, 0))
			continue;
		matched++;
		ret = usdt_site(spec, idx, path, ef, nt, sv);
	}
	if (!ret && matched == 0) {
		usdt_log_none(spec, path, notes, nnotes);
		ret = -ENOENT;
	}
	usdt_notes_free(notes, nnotes);
	return ret;
}
