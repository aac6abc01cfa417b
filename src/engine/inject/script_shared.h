/* uscope script in the inject engine: what the tracer (inject/script.c)
 * and the agent (agent/script.c) share, at inj_ctl.script_off in the
 * region. The program (script/prog.h) is copied in as it is; each map is a
 * table (script/table.h) with a copy of an aggregation's row per thread
 * slot; each slot has the machine's state (script/vm.h's struct
 * script_vm) and room for one string input. Plain C: the agent is
 * freestanding. */
#ifndef USC_ENGINE_INJECT_SCRIPT_SHARED_H
#define USC_ENGINE_INJECT_SCRIPT_SHARED_H

#include "script/prog.h"

#define INJ_SCRIPT_VM 8192	/* bytes of a slot's machine (struct script_vm) */
#define INJ_SCRIPT_STR 512	/* bytes of a slot's string input */
#define INJ_PT_NONE 0xffffffffu	/* pt_map_off: the map is not a thread's own */

/* A per-thread map's value in a thread slot (SCRIPT_MAP_PERTHREAD: every
 * access is @m[tid]): the thread's, with no lookup and no lock. tid says
 * whose it is: a slot given to another thread has it cleared at its first
 * access. The reader shows it as the key tid. */
struct inj_pt {
	uint64_t tid;
	uint64_t present;
	/* the value (the map's vallen, 8-aligned) */
};

struct inj_script {
	uint64_t blob_off;		/* the program, from the region's start */
	uint32_t nmaps;
	uint32_t pad;
	uint64_t vm_off;		/* struct script_vm per slot, INJ_SCRIPT_VM apart */
	uint64_t str_off;		/* INJ_SCRIPT_STR per slot */
	uint64_t tab_off[SCRIPT_MAPS_MAX];	/* each map's struct stab */
	/* per-thread maps: pt_size bytes a slot at pt_off; a map's struct
	 * inj_pt at pt_map_off[m] in them (INJ_PT_NONE: the map is a table's) */
	uint64_t pt_off;
	uint32_t pt_size;
	uint32_t pad2;
	uint32_t pt_map_off[SCRIPT_MAPS_MAX];
	/* the program's parts, from the region's start, for the hit's path
	 * (script_blob's, added up once) */
	uint64_t insns_at, maps_at, strtab_at, probes_at;
	uint32_t nprobes, nstrtab, strlen, pad3;
	/* nsecs: ns0 + (tsc - tsc0) * mult >> 32, CLOCK_MONOTONIC */
	uint64_t tsc0, ns0, mult;
	uint64_t start_ns;		/* elapsed's zero: the script's start */
	/* runtime errors (enum script_err) and each map's updates lost */
	volatile uint64_t errs[SERR_NR];
	volatile uint64_t full[SCRIPT_MAPS_MAX];
};

#endif
