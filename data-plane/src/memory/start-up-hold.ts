/**
 * The data plane's start-up hold on V8's young generation (young-generation.ts), taken when this module is
 * evaluated: main.ts imports it first, so that the other modules' loading is held too (taken later, when the
 * snapshot holder is created, start-up would already have grown the young generation). The snapshot holder
 * ends it once the first snapshot is applied. Only main.ts imports this module: a hold taken in a test
 * process would stay for its whole run.
 */
import { youngGenerationBytes, youngGenerationHold } from './young-generation.js';

export const holdYoungGeneration = youngGenerationHold();
export const endStartUpHold = holdYoungGeneration();
/**
 * The young generation's committed bytes as the hold found them: what loading the bundle left, 4 or 8 MiB
 * depending on when V8's background compile tasks finished (main.ts logs it at debug level).
 */
export const youngGenerationAtHold = youngGenerationBytes();
