/**
 * The CP's one compile cache. It is keyed by definition objects, which are never mutated, so the
 * Kubernetes store's passes, admin writes and the index built at start share each definition's
 * compile (two caches compiled every CR twice at a Kubernetes-store start).
 */
import { createCompileCache } from '#proto/compile/index';

export const compileCache = createCompileCache();
