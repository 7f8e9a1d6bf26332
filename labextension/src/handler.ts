import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** The server extension's namespace: routes live under `<base_url>/vertex-train/`. */
export const NAMESPACE = 'vertex-train';

/**
 * Call the server extension. ServerConnection adds the token and XSRF headers.
 *
 * @param endPoint path under `vertex-train/`, with its query string
 * @param init fetch options (method, body)
 * @returns the JSON body
 * @throws ServerConnection.ResponseError carrying the server's `message`
 */
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {}
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, NAMESPACE, endPoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let data: any = text;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch {
      console.warn('vertex-train: not a JSON response', response);
    }
  }
  if (!response.ok) {
    throw new ServerConnection.ResponseError(response, data?.message ?? text);
  }
  return data as T;
}

/** A path with its query string; empty values are left out. */
export function withQuery(
  path: string,
  query: Record<string, string | number | undefined>
): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== '') {
      params.set(key, String(value));
    }
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** One row of the Training Jobs panel (GET jobs). */
export interface IJobSummary {
  id: string;
  name: string;
  source: 'local' | 'vertex';
  display_name: string;
  state: string;
  final: boolean;
  replicas: number;
  backend: string;
  create_time: string | null;
  start_time: string | null;
  end_time: string | null;
  duration: number | null;
  error: string;
  console_url: string;
  /** enableWebAccess: task name -> Vertex AI's shell URI, or the local `vtrain shell` command;
   * enableDashboardAccess: `task:port` -> the dashboard's URI. */
  access: { [key: string]: string };
  /** What `access` offers, e.g. "Shell into a replica". */
  access_heading: string;
}

/** Where jobs are listed from; Vertex AI's says whether it has more pages. */
export interface IJobSource {
  source: string;
  parent: string;
  /** Vertex AI only: the token of its next page, '' when there is none. */
  next_page_token?: string;
}

/** Every local job and the first page of Vertex AI's (GET jobs). */
export interface IJobList {
  jobs: IJobSummary[];
  truncated: boolean;
  sources: IJobSource[];
  errors: { source: string; message: string }[];
  now: string;
}

/** A further page of Vertex AI's jobs (GET jobs?source=vertex&page_token=). */
export interface IJobPage {
  jobs: IJobSummary[];
  next_page_token: string;
  now: string;
}

/** The PyTorch variables of a replica, in the order they are shown. */
export const PYTORCH_VARIABLES = [
  'MASTER_ADDR',
  'MASTER_PORT',
  'WORLD_SIZE',
  'RANK'
] as const;

/** One replica of a job and the environment Vertex AI gives it (GET jobs/<id>). */
export interface IReplica {
  task_name: string;
  pool: number;
  index: number;
  role: string;
  tf_task: string | null;
  address: string;
  TF_CONFIG: Record<string, unknown> | null;
  CLUSTER_SPEC: Record<string, unknown> | null;
  /** null where the replica has none: evaluators and Reduction Server replicas have no rank */
  MASTER_ADDR: string | null;
  MASTER_PORT: string | null;
  WORLD_SIZE: string | null;
  RANK: string | null;
}

export interface IJobDetail {
  summary: IJobSummary;
  job: Record<string, unknown>;
  address_style: string;
  addresses_recorded?: boolean;
  replicas: IReplica[];
  replicas_error?: string;
}

export interface ILogEntry {
  timestamp: string;
  time: string;
  replica: string;
  severity: string;
  text: string;
  insert_id: string;
}

/** One page of a job's log (GET jobs/<id>/logs?cursor=). */
export interface ILogPage {
  entries: ILogEntry[];
  next_cursor: string;
  done: boolean;
  state: string;
  /** when to ask again: the server's reader's pace (seconds on Cloud Logging, 0 after a full page) */
  next_poll_ms: number;
}

/** The API path of a job. */
export function jobPath(id: string, ...rest: string[]): string {
  return ['jobs', encodeURIComponent(id), ...rest].join('/');
}
