/** V8 heap management of the data plane process: the young generation held during syncs, the heap trimmed when idle. */
export { youngGenerationHold, type YoungGenerationHold } from './young-generation.js';
export { idleTrimmer, startIdleTrim, v8Collections, type Collections, type IdleTrimOptions } from './idle-trim.js';
