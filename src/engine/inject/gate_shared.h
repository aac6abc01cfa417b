/* Shared by the gate's kernel program (gate.bpf.c), its loader (gate.c) and
 * the janitor (session/janitor.c, which reads the map after a death). */
#ifndef USC_ENGINE_INJECT_GATE_SHARED_H
#define USC_ENGINE_INJECT_GATE_SHARED_H

#define GATE_MAX_PROCS 65536	/* processes known at once */
#define GATE_RING_SIZE (64 * 1024)

/* A process's state in the gate's map (key: its tgid). */
enum gate_state {
	GATE_STOPPED = 1,	/* stopped by the gate (SIGSTOP), uscope not done with it */
	GATE_GO = 2,		/* attached, refused, or uscope's own: runs on */
	GATE_SEEN = 3,		/* has a controlling terminal: seen, not stopped */
};

/* What uscope is told, by the ring buffer: a process seen. */
struct gate_seen {
	unsigned int tgid;
	unsigned int stopped;	/* the gate sent it SIGSTOP */
};

#endif
