/* The kernel's event name of each site: the probe's EVENT, or made from
 * the function, USDT probe or address, unique in the session. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "resolve/resolve_int.h"

static void sanitize_name(const char *in, char *out, size_t max)
{
	size_t n = 0;

	if (!isalpha((unsigned char)in[0]) && in[0] != '_' && n + 1 < max)
		out[n++] = '_';
	for (const char *p = in; *p && n + 1 < max; p++) {
		if (*p == '@')
			break;		/* drop the symbol version */
		if (isalnum((unsigned char)*p) || *p == '_')
			out[n++] = *p;
		else if (n && out[n - 1] != '_')
			out[n++] = '_';
	}
	while (n > 1 && out[n - 1] == '_')
		n--;
	out[n] = 0;
}

void resolve_name_site(struct usc_site *site, struct usc_site *all, size_t nall,
		       bool several)
{
	const struct usc_probe_spec *spec = site->spec;
	char base[USC_NAME_MAX], tmp[USC_NAME_MAX * 2];
	const char *suffix = site->is_return ? "__return" : "";
	size_t room = USC_NAME_MAX - 1 - strlen(suffix) - 4; /* keep space for _NN */

	if (spec->event_given && !several) {
		snprintf(site->event, sizeof(site->event), "%s", spec->event);
		snprintf(site->label, sizeof(site->label), "%s", spec->event);
		return;
	}
	if (spec->loc_kind == USC_LOC_USDT)
		snprintf(tmp, sizeof(tmp), "%s", site->symbol);	/* provider_name */
	else if (spec->loc_kind == USC_LOC_ADDRESS)
		snprintf(tmp, sizeof(tmp), "addr_0x%llx", (unsigned long long)site->vaddr);
	else if (spec->has_offset)
		snprintf(tmp, sizeof(tmp), "%s_0x%llx", site->symbol,
			 (unsigned long long)spec->offset);
	else
		snprintf(tmp, sizeof(tmp), "%s%s%s", spec->event_given ? spec->event : "",
			 spec->event_given ? "_" : "", site->symbol);
	sanitize_name(tmp, base, room < sizeof(base) ? room : sizeof(base));
	snprintf(tmp, sizeof(tmp), "%s%s", base, suffix);
	for (unsigned k = 2;; k++) {
		bool clash = false;

		for (size_t i = 0; i < nall; i++)
			if (&all[i] != site && all[i].event[0] && !strcmp(all[i].event, tmp))
				clash = true;
		if (!clash)
			break;
		snprintf(tmp, sizeof(tmp), "%s_%u%s", base, k, suffix);
	}
	tmp[USC_NAME_MAX - 1] = 0;	/* base was sized to leave room */
	memcpy(site->event, tmp, USC_NAME_MAX);
	/* Every site of one USDT probe shows as PROVIDER:NAME (or EVENT). */
	if (site->label[0] == 0)
		snprintf(site->label, sizeof(site->label), "%s", site->event);
}
