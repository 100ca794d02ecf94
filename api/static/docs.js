// Swagger UI on the service's own OpenAPI document. validatorUrl null: no call to validator.swagger.io,
// so the page makes no request outside this service (it works on a Jetson without internet).
"use strict";
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
