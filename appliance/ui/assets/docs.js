// Starts Swagger UI (vendored, /ui/vendor/swagger-ui-dist) on the appliance's own OpenAPI document. A file, not an
// inline script, so the page runs under the console's Content-Security-Policy. The token, when the appliance asks
// for one, is the console's (sessionStorage, this tab only) and goes out as a Bearer header, never in a URL.
"use strict";
(function () {
  var TOKEN_KEY = "kumiho-ce.token";
  var status = document.getElementById("docs-status");

  function token() { return window.sessionStorage.getItem(TOKEN_KEY); }

  function withToken(request) {
    var value = token();
    var own = request.url.indexOf("/") === 0 || request.url.indexOf(window.location.origin + "/") === 0;
    if (value && own) {
      request.headers.Authorization = "Bearer " + value;
    }
    return request;
  }

  // `asked`: the token was just typed in; a second 401 drops it and stops (no prompt after prompt).
  function load(asked) {
    var headers = { Accept: "application/json" };
    if (token()) headers.Authorization = "Bearer " + token();
    return fetch("/api/schema/openapi.json", { headers: headers }).then(function (response) {
      if (response.status === 401) {
        window.sessionStorage.removeItem(TOKEN_KEY);
        if (asked) throw new Error("the appliance refused that token; reload the page to enter it again");
        var given = window.prompt("This appliance asks for its token (file `token` in the data directory):");
        if (!given || !given.trim()) throw new Error("the API description needs the appliance token");
        window.sessionStorage.setItem(TOKEN_KEY, given.trim());
        return load(true);
      }
      if (!response.ok) throw new Error("the API description answered HTTP " + response.status);
      return response.json();
    });
  }

  load().then(function (spec) {
    status.textContent = "";
    window.SwaggerUIBundle({
      spec: spec,
      dom_id: "#swagger-ui",
      deepLinking: true,
      validatorUrl: null,            // offline: no badge from a validator service
      tryItOutEnabled: false,
      requestInterceptor: withToken,
      presets: [window.SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
    });
  }).catch(function (error) {
    status.textContent = "Could not load the API description: " + error.message;
  });
})();
