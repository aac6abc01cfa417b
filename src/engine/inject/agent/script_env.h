/* The agent's bindings of script/vm.h's macros (agent/script.c's senv and
 * helpers), the same for its two steps: agent/script.c defines SCRIPT_STEP
 * and SCRIPT_IN (and SCRIPT_FAST_ONLY) and includes this once a step. No
 * include guard: vm.h undefines them all at its end. */
#define SCRIPT_INLINE ALWAYS
#define SCRIPT_IN_STR(env, k, dst, cap) s_in_str((struct senv *)(env), k, dst, cap)
#define SCRIPT_BUILTIN(env, w) s_builtin((struct senv *)(env), w)
#define SCRIPT_COMM(env, dst) s_comm((struct senv *)(env), dst)
#define SCRIPT_READ(env, dst, addr, len) s_read((struct senv *)(env), dst, addr, len)
#define SCRIPT_READ_STR(env, dst, addr, cap) s_read_str((struct senv *)(env), dst, addr, cap)
#define SCRIPT_MAP(env, idx, m, key, create) s_map((struct senv *)(env), idx, key, create)
#define SCRIPT_MAP_DEL(env, idx, m, key) s_del((struct senv *)(env), idx, key)
#define SCRIPT_MAP8(env, idx, m, k, create) s_map8((struct senv *)(env), idx, k, create)
#define SCRIPT_MAP_DEL8(env, idx, m, k) s_del8((struct senv *)(env), idx, k)
#define SCRIPT_EMIT(env, rec, len) (agent_script_rec(((struct senv *)(env))->c,            \
						     ((struct senv *)(env))->s,            \
						     ((struct senv *)(env))->counts,       \
						     ((struct senv *)(env))->site, rec, len), 0)
#define SCRIPT_USTACK(env, frames, id) 1
#define SCRIPT_ERR(env, err, idx) s_err(((struct senv *)(env))->sc, err, idx)
#define SCRIPT_RAND(env) s_rand((struct senv *)(env))
#include "script/vm.h"
