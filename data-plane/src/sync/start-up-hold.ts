/**
 * The data plane's start-up hold on V8's young generation (young-generation.ts), taken when this module is
 * evaluated: main.ts imports it first, so that the other modules' loading is held too (taken later, when the
 * snapshot holder was created, start-up had grown the young generation to 8 MiB; here it finds the 4 MiB that
 * node's loading of the bundle's one file leaves, where V8 starts at 1 MiB). The snapshot holder
 * ends it once the first snapshot is applied. Only main.ts imports this module: a hold taken in a test
 * process would stay for its whole run.
 */
import { youngGenerationHold } from './young-generation.js';

export const holdYoungGeneration = youngGenerationHold();
export const endStartUpHold = holdYoungGeneration();
