/**
 * Starts a whole gateway for one test file: a control plane, a logged-in admin client and
 * `dataPlanes` data planes connected to it; `stop()` tears everything down (SIGTERM) and
 * reports every service that did not exit with code 0.
 */
import { createAdminClient, type AdminClient } from './admin-client.js';
import { startControlPlane, type ControlPlane, type StartControlPlaneOptions } from './start-control-plane.js';
import { startDataPlane, type DataPlane } from './start-data-plane.js';

export interface Gateway {
  cp: ControlPlane;
  admin: AdminClient;
  dps: DataPlane[];
  /** The first data plane. */
  dp: DataPlane;
  /** Stops the data planes, then the control plane; resolves with non-zero exits, '' when all were 0. */
  stop(): Promise<string>;
}

export interface StartGatewayOptions {
  dataPlanes?: number;
  controlPlane?: StartControlPlaneOptions;
  dataPlaneEnv?: Record<string, string>;
}

export async function startGateway(options: StartGatewayOptions = {}): Promise<Gateway> {
  const cp = await startControlPlane(options.controlPlane);
  const dps: DataPlane[] = [];
  try {
    const admin = await createAdminClient(cp);
    for (let i = 0; i < (options.dataPlanes ?? 1); i++) {
      dps.push(await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: options.dataPlaneEnv }));
    }
    return {
      cp,
      admin,
      dps,
      dp: dps[0],
      async stop() {
        const problems: string[] = [];
        for (const dp of dps) {
          if (!dp.process.running()) continue;
          const status = await dp.stop();
          if (status.code !== 0) problems.push(`${dp.process.name} exited with ${status.code ?? status.signal}\n${dp.recentLogs()}`);
        }
        if (cp.process.running()) {
          const status = await cp.stop();
          if (status.code !== 0) problems.push(`${cp.name} exited with ${status.code ?? status.signal}\n${cp.recentLogs()}`);
        }
        await cp.dispose();
        return problems.join('\n');
      },
    };
  } catch (err) {
    await Promise.all(dps.map((dp) => dp.kill()));
    await cp.kill();
    await cp.dispose();
    throw err;
  }
}
