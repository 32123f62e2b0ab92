import { GatehouseError } from '#proto/errors';

/** The GatehouseError a call throws, for asserting on code, field and message together. */
export function gatehouseErrorOf(fn: () => unknown): GatehouseError {
  try {
    fn();
  } catch (err) {
    if (err instanceof GatehouseError) return err;
    throw err;
  }
  throw new Error('expected a GatehouseError');
}
