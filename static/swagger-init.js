// Starts Swagger UI on /docs from the attributes of its own script tag (no inline script).
(function () {
  "use strict";
  var tag = document.currentScript;
  var config = JSON.parse(tag.getAttribute("data-config") || "{}");
  config.url = tag.getAttribute("data-spec-url");
  config.dom_id = "#swagger-ui-container";
  window.addEventListener("load", function () {
    window.ui = SwaggerUIBundle(config);
  });
})();
