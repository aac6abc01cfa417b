/* Linked into the static binary only (make static: build/static/uscope, with
 * -Wl,--wrap=dlopen,--wrap=getaddrinfo), never into ./uscope nor the tests'
 * builds. A static glibc has no dynamic loader of its own: a dlopen, or an
 * NSS module named by /etc/nsswitch.conf (getaddrinfo of a name), would load
 * the host's shared libc beside the static one, a glibc of another version
 * on another distribution, which "requires at run time the shared libraries
 * from the glibc version used for linking" (ld's warning). So no path of
 * the static binary reaches them:
 *
 * - dlopen: libdwfl dlopens libdebuginfod when a module's debug info is not
 *   on the machine (and libtraceevent would dlopen its plugins, which uscope
 *   never loads). Here it loads nothing: the static binary does not ask a
 *   debuginfod server, and says so once when DEBUGINFOD_URLS asks it to
 *   (doc/install.md: what the static binary gives up).
 * - getaddrinfo (--serve ADDR:PORT): numeric addresses only, which glibc
 *   converts without NSS (AI_NUMERICHOST), and "localhost" as 127.0.0.1;
 *   a host name is refused in one line. */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

void *__wrap_dlopen(const char *file, int mode);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);
int __real_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);

void *__wrap_dlopen(const char *file, int mode)
{
	const char *urls = getenv("DEBUGINFOD_URLS");

	(void)mode;
	if (file && strstr(file, "libdebuginfod") && urls && *urls)
		log_warn("this static uscope does not ask debuginfod servers (DEBUGINFOD_URLS is "
			 "set): fetch a file's debug info with debuginfod-find and put it at "
			 "/usr/lib/debug/.build-id/xx/yyyy.debug, or use a dynamically linked "
			 "uscope");
	else
		log_debug("static build: not loading %s", file ? file : "(null)");
	return NULL;
}

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	struct addrinfo h = hints ? *hints : (struct addrinfo){.ai_family = AF_UNSPEC};
	static int said;	/* the caller may ask again with other flags */
	int ret;

	if (node && !strcmp(node, "localhost")) {
		node = "127.0.0.1";
		h.ai_family = AF_INET;
	}
	h.ai_flags |= AI_NUMERICHOST;
	ret = __real_getaddrinfo(node, service, &h, res);
	if (ret == EAI_NONAME && node && !said++)
		log_error("this static uscope takes a numeric address, not the name '%s' "
			  "(127.0.0.1, [::1], 0.0.0.0 for every interface, or localhost)", node);
	return ret;
}
