/**
 * What every part of the Kubernetes store shares: the custom resources it keeps, the stored kind each
 * holds, a CR's verdict, and how an apiserver failure reads.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { GatehouseError } from '#proto/errors';
import type { ApiDefinition, BasicAuthCredential, KeyAuthCredential, OAuthServerDefinition } from '#proto/definition/index';
import { storedApis, storedBasicAuthCredentials, storedKeyAuthCredentials, storedOAuthServers, type StoredKind } from '../definition-kinds.js';
import { API_DEFINITION, BASIC_AUTH_CREDENTIAL, GROUP, KEY_AUTH_CREDENTIAL, OAUTH_SERVER, VERSION, type ResourceKind } from './crds.js';

export interface CustomResource extends KubernetesObject {
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** One CR and what the CP made of it: the input of the controller's status. */
export interface ResourceVerdict {
  resource: ResourceKind;
  metadataName: string;
  uid: string;
  generation: number;
  /** The Janus name: spec.name, else metadata.name. */
  name: string;
  /** null = accepted (part of the snapshot). */
  error: GatehouseError | null;
  /** Accepted only: revision of the first snapshot that carried this generation. */
  sinceRevision: number | null;
  /** The CR's status as last seen (the controller writes only what differs). */
  status: Record<string, unknown> | undefined;
}

/** A stored kind and the custom resource it is kept in. */
interface Kind<T> extends StoredKind<T> {
  resource: ResourceKind;
}

export const KINDS = [
  { resource: API_DEFINITION, ...storedApis } satisfies Kind<ApiDefinition>,
  { resource: OAUTH_SERVER, ...storedOAuthServers } satisfies Kind<OAuthServerDefinition>,
  { resource: BASIC_AUTH_CREDENTIAL, ...storedBasicAuthCredentials } satisfies Kind<BasicAuthCredential>,
  { resource: KEY_AUTH_CREDENTIAL, ...storedKeyAuthCredentials } satisfies Kind<KeyAuthCredential>,
] as const;

export type AnyKind = (typeof KINDS)[number];

/** Where a kind's CRs are, as client-node's CustomObjectsApi takes it. */
export const crTarget = (namespace: string, kind: AnyKind) => ({ group: GROUP, version: VERSION, namespace, plural: kind.resource.plural });

/** HTTP status of a client-node ApiException (or of a Status object in its body). */
export function httpStatusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown; body?: { code?: unknown } };
  for (const v of [e?.code, e?.statusCode, e?.body?.code]) if (typeof v === 'number') return v;
  return undefined;
}

export function reasonOf(err: unknown): string | undefined {
  const body = (err as { body?: unknown })?.body;
  const parsed =
    typeof body === 'string'
      ? (() => {
          try {
            return JSON.parse(body);
          } catch {
            return undefined;
          }
        })()
      : body;
  return (parsed as { reason?: string } | undefined)?.reason;
}

export function unavailable(message: string, cause?: unknown): GatehouseError {
  return new GatehouseError('STORE_UNAVAILABLE', message, { cause });
}

export function sameUid(a: CustomResource | undefined, b: CustomResource): boolean {
  return a !== undefined && a.metadata?.uid === b.metadata?.uid;
}
