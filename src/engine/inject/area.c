/* Memory for trampolines: within rel32 reach of the module whose code jumps
 * to them, mapped by a system call run in the process (the near-code
 * allocator). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"
#include "engine/inject/tramp.h"

/* A free range of size bytes with every byte of [lo, hi) within rel32 reach
 * of every byte of it: the gaps between mappings, nearest first. */
static int area_map(struct remote *rem, struct inj_area *a, const struct proc_map *maps,
		    size_t nmaps)
{
	const uint64_t reach = 0x7fff0000ULL, page = 4096;
	uint64_t tried[16];
	size_t ntried = 0;

	while (ntried < sizeof(tried) / sizeof(tried[0])) {
		uint64_t best = 0, best_dist = UINT64_MAX;

		for (size_t i = 0; i < nmaps; i++) {
			uint64_t gs = i ? maps[i - 1].end : 0x10000, ge = maps[i].start, cand, dist;
			bool seen = false;

			if (ge <= gs || ge - gs < a->size)
				continue;
			/* as close to the module as the gap allows */
			cand = ge <= a->lo ? (ge - a->size) & ~(page - 1) : gs;
			if (cand < gs || cand + a->size > ge)
				continue;
			if (cand + a->size > a->lo + reach || a->hi > cand + reach)
				continue;
			for (size_t k = 0; k < ntried; k++)
				seen |= tried[k] == cand;
			dist = cand < a->lo ? a->lo - cand : cand - a->lo;
			if (!seen && dist < best_dist) {
				best = cand;
				best_dist = dist;
			}
		}
		if (!best)
			break;
		tried[ntried++] = best;
		long r = inj_rsys(rem, SYS_mmap, (long)best, (long)a->size, PROT_READ | PROT_EXEC,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

		if (!inj_rsys_failed(r) && (uint64_t)r == best) {
			log_debug("inject: trampolines for %s at 0x%llx", a->path,
				  (unsigned long long)best);
			a->base = best;
			return 0;
		}
		if (inj_rsys_failed(r))
			log_debug("inject: trampolines for %s not at 0x%llx: %s", a->path,
				  (unsigned long long)best, strerror((int)-r));
		else
			log_debug("inject: trampolines for %s not at 0x%llx: mapped at 0x%llx",
				  a->path, (unsigned long long)best, (unsigned long long)r);
		if (!inj_rsys_failed(r))	/* a kernel without MAP_FIXED_NOREPLACE (4.17) */
			inj_rsys(rem, SYS_munmap, r, (long)a->size, 0, 0, 0, 0);
	}
	log_error("no free address range within 2 GiB of %s in process %d for trampolines",
		  a->path, (int)rem->pid);
	return -ENOMEM;
}

int inj_areas(struct inj *j, struct inj_image *img, struct remote *rem,
	      const struct proc_map *maps, size_t nmaps)
{
	for (size_t p = 0; p < img->npatches; p++) {
		const struct usc_site *site = j->base.sites[img->patches[p].sites[0]];
		size_t a;

		for (a = 0; a < img->nareas; a++)
			if (!strcmp(img->areas[a].path, site->path))
				break;
		if (a == img->nareas) {
			struct inj_area *na = realloc(img->areas, (img->nareas + 1) * sizeof(*na));

			if (!na)
				return -ENOMEM;
			img->areas = na;
			memset(&na[a], 0, sizeof(na[a]));
			na[a].path = site->path;
			na[a].lo = UINT64_MAX;
			for (size_t m = 0; m < nmaps; m++)
				if (maps[m].path && !strcmp(maps[m].path, site->path)) {
					if (maps[m].start < na[a].lo)
						na[a].lo = maps[m].start;
					if (maps[m].end > na[a].hi)
						na[a].hi = maps[m].end;
				}
			if (na[a].lo == UINT64_MAX)
				na[a].lo = na[a].hi = img->patches[p].addr;
			img->nareas++;
		}
		img->patches[p].area = (int)a;
		img->areas[a].size += TRAMP_MAX * (img->patches[p].nsites + 1);
	}
	for (size_t a = 0; a < img->nareas; a++) {
		int ret;

		img->areas[a].size = (img->areas[a].size + 4095) & ~4095ULL;
		ret = area_map(rem, &img->areas[a], maps, nmaps);
		if (ret)
			return ret;
	}
	return 0;
}
