/**
 * The CP's one compile cache. It is keyed by definition objects, which are never mutated, so the
 * Kubernetes store's passes, admin writes and the index built at start share each definition's
 * compile (two caches compiled every CR twice at a Kubernetes-store start). It keeps each definition's
 * verdict and conflict keys, not its compiled routes: the control plane routes nothing (explain-route compiles
 * a configuration of its own), and at 10,000 APIs the routes held 12 MB.
 */
import { createCompileCache } from '#proto/compile/index';

export const compileCache = createCompileCache({ keepRoutes: false });
