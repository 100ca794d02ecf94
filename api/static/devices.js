// The device list (GET /v1/devices), with the device a link names chosen when the service has it.

import { api } from "./http.js";
import { linked, showLinkNote } from "./link.js";
import { $, state } from "./state.js";

export function deviceName(id) {
  const d = state.devices.find((x) => x.id === id);
  return d ? d.name : id;
}

export async function loadDevices() {
  const body = await api("/v1/devices");
  state.devices = body.devices;
  const select = $("device");
  select.replaceChildren(...body.devices.map((d) => new Option(`${d.name} (${d.power_modes} modes)`, d.id)));
  const wanted = linked("device");
  const known = body.devices.some((d) => d.id === wanted);
  select.value = known ? wanted
    : (body.devices.some((d) => d.id === "agx-xavier") ? "agx-xavier" : body.devices[0].id);
  // A link naming a device this service does not have says so, and which one is shown instead.
  state.linkNotes.device = wanted && !known ? `The link's device "${wanted}" is not one of this service's ` +
    `devices; showing ${deviceName(select.value)} (${select.value}) instead.` : "";
  showLinkNote();
}
